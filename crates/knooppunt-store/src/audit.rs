//! The audit trail: an append-only, hash-chained record of who changed what, who was
//! refused, and what the hub decided on its own. Every backend keeps the entries in
//! sequence order and chains them the same way ([`AuditEntry::seal`]); anyone holding the
//! entries (the store, or an export) can check the chain with [`verify`].
//!
//! The field names follow Logius' Logboek Dataverwerkingen where they fit: `trace_id`,
//! `name` (the operation), `start_time`, `status_code`, `processing_activity_id` and
//! `data_subject_id`.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What the hub appends: one action, by one actor, on one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// When it happened (milliseconds since the Unix epoch).
    pub start_time: u64,
    /// The operation, e.g. `subscription.create`, `approval.revoke`, `request.refused`.
    pub name: String,
    /// `OK`, or `ERROR` for a refusal.
    pub status_code: String,
    /// The principal that acted (`knooppunt` for the hub itself); `None` when the request
    /// named none that the hub knows.
    pub actor: Option<String>,
    /// The actor's organisation (OIN), when known.
    pub actor_oin: Option<String>,
    /// What it acted on, e.g. `subscription/<id>`, `eventtype/<id>`, `principal/<name>`.
    pub object: Option<String>,
    /// The request's id (`X-Request-Id`, or the hub's own), when a request caused it.
    pub request_id: Option<String>,
    /// The W3C trace id of the request (`traceparent`), when it sent one.
    pub trace_id: Option<String>,
    /// The processing activity (Logboek Dataverwerkingen): here the kind of change.
    pub processing_activity_id: Option<String>,
    /// A reference to whom the data is about, when an action concerns one (an event's
    /// `subject`, say); never the data itself.
    pub data_subject_id: Option<String>,
    /// What changed or why it was refused, as JSON; secrets never.
    pub details: serde_json::Value,
    /// The principals it concerns besides the actor (an entry's owner, a subscription's
    /// owner): they see it in the trail.
    pub concerns: Vec<String>,
}

/// A stored audit entry: its place in the chain, the record, and the hashes that chain it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub seq: u64,
    #[serde(flatten)]
    pub record: AuditRecord,
    /// The hash of the entry before it (hex SHA-256); [`GENESIS`] for the first.
    pub prev_hash: String,
    /// This entry's hash: SHA-256 over `prev_hash`, the sequence number and the record.
    pub hash: String,
}

/// The `prev_hash` of the very first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

impl AuditEntry {
    /// The entry `record` becomes as number `seq` after the entry with hash `prev_hash`.
    pub fn seal(seq: u64, record: AuditRecord, prev_hash: &str) -> AuditEntry {
        let hash = chain_hash(seq, &record, prev_hash);
        AuditEntry {
            seq,
            record,
            prev_hash: prev_hash.to_owned(),
            hash,
        }
    }

    /// Whether the entry's hash is the hash of what it holds.
    pub fn is_intact(&self) -> bool {
        chain_hash(self.seq, &self.record, &self.prev_hash) == self.hash
    }
}

/// SHA-256 (hex) over the previous hash, the sequence number and the record's JSON (its
/// fields in declaration order; `details` as `serde_json` writes it, keys sorted).
fn chain_hash(seq: u64, record: &AuditRecord, prev_hash: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    hasher.update(b"\n");
    hasher.update(seq.to_string().as_bytes());
    hasher.update(b"\n");
    hasher.update(serde_json::to_vec(record).expect("a record is JSON"));
    hex(&hasher.finalize())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut text, b| {
        let _ = write!(text, "{b:02x}");
        text
    })
}

/// Where a chain is broken, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub seq: u64,
    pub why: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "entry {} is broken: {}", self.seq, self.why)
    }
}

/// Checks entries given in sequence order (a page at a time: `previous` is the last
/// entry of the page before, `None` at the start) and returns the last one checked, or the
/// first broken one. The first entry's `prev_hash` is taken as given here: whether the trail
/// starts where it should is [`StartAnchor`]'s to say.
pub fn verify<'a>(
    previous: Option<(u64, &str)>,
    entries: impl IntoIterator<Item = &'a AuditEntry>,
) -> Result<Option<(u64, String)>, Broken> {
    let mut last = previous.map(|(seq, hash)| (seq, hash.to_owned()));
    for entry in entries {
        if !entry.is_intact() {
            return Err(Broken {
                seq: entry.seq,
                why: "its hash does not match what it holds (it was changed after it was \
                      written)"
                    .into(),
            });
        }
        if let Some((seq, hash)) = &last {
            if entry.seq != seq + 1 {
                return Err(Broken {
                    seq: entry.seq,
                    why: format!("it follows entry {seq}: entries in between are missing"),
                });
            }
            if &entry.prev_hash != hash {
                return Err(Broken {
                    seq: entry.seq,
                    why: format!(
                        "its prev_hash is not the hash of entry {seq} (an entry before it was \
                         changed, removed or replaced)"
                    ),
                });
            }
        }
        last = Some((entry.seq, entry.hash.clone()));
    }
    Ok(last)
}

/// What [`SelectionCheck`] found of a selection of the trail (a filtered export, or the
/// entries one principal may see).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectionChecked {
    /// Entries checked against their own hash.
    pub entries: u64,
    pub first: Option<u64>,
    pub last: Option<u64>,
    /// Links checked: an entry right after the one before it in the selection.
    pub links: u64,
    /// Places where entries of the trail are not in the selection: what is between them is
    /// not checked (only the whole trail shows that nothing was removed there).
    pub gaps: u64,
}

/// Checks a selection of the trail, given in sequence order: every entry against its own
/// hash (which covers its number, what it holds and the hash it names before it), and the
/// link of every entry that directly follows another in the selection. What lies between
/// entries that do not follow each other is not the selection's, so it is counted as a gap,
/// never checked: a selection shows that its entries are as written, not that none was
/// removed around them (for that, [`verify`] the whole trail).
#[derive(Debug, Default)]
pub struct SelectionCheck {
    last: Option<(u64, String)>,
    checked: SelectionChecked,
}

impl SelectionCheck {
    /// The next entry of the selection.
    pub fn see(&mut self, entry: &AuditEntry) -> Result<(), Broken> {
        if let Some((seq, _)) = &self.last
            && entry.seq <= *seq
        {
            return Err(Broken {
                seq: entry.seq,
                why: format!("it comes after entry {seq}: a selection is in sequence order"),
            });
        }
        match &self.last {
            Some((seq, _)) if entry.seq != seq + 1 => {
                self.checked.gaps += 1;
                verify(None, std::iter::once(entry))?;
            }
            Some((seq, hash)) => {
                verify(Some((*seq, hash)), std::iter::once(entry))?;
                self.checked.links += 1;
            }
            None => {
                verify(None, std::iter::once(entry))?;
            }
        }
        self.checked.entries += 1;
        self.checked.first = self.checked.first.or(Some(entry.seq));
        self.checked.last = Some(entry.seq);
        self.last = Some((entry.seq, entry.hash.clone()));
        Ok(())
    }

    pub fn checked(&self) -> &SelectionChecked {
        &self.checked
    }
}

/// The `name` of the entry that records a removal by retention: its `details` say through
/// which entry the trail was removed (`removedThrough`) and that entry's hash (`hash`), the
/// `prev_hash` the first entry kept then has. It is written before the entries are removed,
/// so the trail's start is anchored in the chain itself.
pub const RETENTION: &str = "audit.retention";

/// The details of a [`RETENTION`] entry: entries up to `through` (whose hash is `hash`) are
/// removed, those older than `before_ms`.
pub fn retention_details(through: u64, hash: &str, before_ms: u64) -> serde_json::Value {
    serde_json::json!({"removedThrough": through, "hash": hash, "olderThan": before_ms})
}

/// Checks where a trail starts, fed every entry in sequence order (with [`verify`]): its
/// first entry starts the chain (entry 1 after [`GENESIS`]), or follows the last entry a
/// removal by retention recorded on the trail. So removing the oldest entries is told from
/// retention, as removing entries at the end is by the head and in the middle by the chain.
#[derive(Debug, Default)]
pub struct StartAnchor {
    first: Option<(u64, String)>,
    /// Each removal by retention the trail records: through which entry, and its hash.
    removed: std::collections::HashMap<u64, String>,
}

impl StartAnchor {
    /// Takes the next entry (only intact entries should come: check with [`verify`] first).
    pub fn see(&mut self, entry: &AuditEntry) {
        if self.first.is_none() {
            self.first = Some((entry.seq, entry.prev_hash.clone()));
        }
        if entry.record.name == RETENTION {
            let details = &entry.record.details;
            if let (Some(through), Some(hash)) =
                (details["removedThrough"].as_u64(), details["hash"].as_str())
            {
                self.removed.insert(through, hash.to_owned());
            }
        }
    }

    /// Whether the trail seen starts where it should.
    pub fn check(&self) -> Result<(), Broken> {
        let Some((seq, prev_hash)) = &self.first else {
            return Ok(());
        };
        if *seq == 1 && prev_hash == GENESIS {
            return Ok(());
        }
        let before = seq.saturating_sub(1);
        if self.removed.get(&before) == Some(prev_hash) {
            return Ok(());
        }
        Err(Broken {
            seq: *seq,
            why: if *seq == 1 {
                "it is entry 1, but does not start the chain (its prev_hash is not the \
                 genesis hash): the trail's start was replaced"
                    .into()
            } else {
                format!(
                    "the trail starts at entry {seq}, and no removal by retention on the trail \
                     says entries up to {before} were removed: the oldest entries were deleted"
                )
            },
        })
    }
}

/// What [`AuditLog::audit_entries`](crate::AuditLog::audit_entries) reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditRange {
    /// Entries after this sequence number (all when `None`).
    pub after: Option<u64>,
    /// At most this many.
    pub limit: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: u64) -> AuditRecord {
        AuditRecord {
            start_time: n,
            name: "subscription.create".into(),
            status_code: "OK".into(),
            actor: Some("kvk".into()),
            actor_oin: None,
            object: Some(format!("subscription/{n}")),
            request_id: None,
            trace_id: None,
            processing_activity_id: None,
            data_subject_id: None,
            details: serde_json::json!({"n": n}),
            concerns: Vec::new(),
        }
    }

    fn chain(n: u64) -> Vec<AuditEntry> {
        let mut entries: Vec<AuditEntry> = Vec::new();
        for seq in 1..=n {
            let prev = entries
                .last()
                .map_or(GENESIS.to_owned(), |e| e.hash.clone());
            entries.push(AuditEntry::seal(seq, record(seq), &prev));
        }
        entries
    }

    #[test]
    fn an_intact_chain_verifies_and_any_change_names_its_entry() {
        let entries = chain(5);
        assert_eq!(verify(None, &entries).unwrap().unwrap().0, 5);
        // Verifying page by page gives the same.
        let first = verify(None, &entries[..2]).unwrap().unwrap();
        assert_eq!(
            verify(Some((first.0, &first.1)), &entries[2..])
                .unwrap()
                .unwrap()
                .0,
            5
        );

        let mut changed = entries.clone();
        changed[2].record.actor = Some("admin".into());
        assert_eq!(verify(None, &changed).unwrap_err().seq, 3);

        // Rehashing the changed entry breaks the link to the next one.
        let mut rehashed = changed.clone();
        rehashed[2] = AuditEntry::seal(3, rehashed[2].record.clone(), &entries[1].hash);
        assert_eq!(verify(None, &rehashed).unwrap_err().seq, 4);

        let mut removed = entries.clone();
        removed.remove(1);
        assert_eq!(verify(None, &removed).unwrap_err().seq, 3);

        // The links hold from any entry on; where the trail starts is the anchor's to say.
        assert_eq!(verify(None, &entries[2..]).unwrap().unwrap().0, 5);
    }

    fn anchored(entries: &[AuditEntry]) -> Result<(), Broken> {
        let mut anchor = StartAnchor::default();
        entries.iter().for_each(|e| anchor.see(e));
        anchor.check()
    }

    #[test]
    fn the_start_is_the_genesis_or_a_recorded_removal() {
        let mut entries = chain(5);
        assert!(anchored(&entries).is_ok());
        assert!(anchored(&[]).is_ok());
        // The oldest entries deleted: the trail starts at 3, and nothing says why.
        let deleted = anchored(&entries[2..]).unwrap_err();
        assert_eq!(deleted.seq, 3);
        assert!(deleted.why.contains("up to 2"), "{}", deleted.why);

        // A removal by retention recorded through entry 2: a start at 3 is anchored...
        let mut retention = record(6);
        retention.name = RETENTION.into();
        retention.details = retention_details(2, &entries[1].hash, 6);
        entries.push(AuditEntry::seal(6, retention, &entries[4].hash));
        assert!(anchored(&entries[2..]).is_ok());
        // ...and while the removal has not happened yet, so is the start at 1...
        assert!(anchored(&entries).is_ok());
        // ...but not a start at 4: entry 3 was deleted beyond what retention removed.
        assert_eq!(anchored(&entries[3..]).unwrap_err().seq, 4);

        // Entry 1 that does not start the chain.
        let mut forged = chain(2);
        forged[0] = AuditEntry::seal(1, record(1), &"1".repeat(64));
        assert_eq!(anchored(&forged).unwrap_err().seq, 1);
    }

    fn selection(entries: &[&AuditEntry]) -> Result<SelectionChecked, Broken> {
        let mut check = SelectionCheck::default();
        for entry in entries {
            check.see(entry)?;
        }
        Ok(check.checked().clone())
    }

    #[test]
    fn a_selection_is_checked_entry_by_entry_and_its_gaps_are_counted_not_checked() {
        let entries = chain(8);
        let e = |seq: usize| &entries[seq - 1];
        let checked = selection(&[e(2), e(3), e(6), e(8)]).unwrap();
        assert_eq!(
            checked,
            SelectionChecked {
                entries: 4,
                first: Some(2),
                last: Some(8),
                links: 1,
                gaps: 2,
            }
        );
        // A changed entry is found, in a gap or not.
        let mut changed = e(6).clone();
        changed.record.actor = Some("admin".into());
        assert_eq!(selection(&[e(2), &changed]).unwrap_err().seq, 6);
        // A rehashed one too, where the entry before it is in the selection.
        let rehashed = AuditEntry::seal(3, changed.record.clone(), &e(2).hash);
        assert_eq!(selection(&[e(2), &rehashed, e(4)]).unwrap_err().seq, 4);
        // Out of order, or twice.
        assert_eq!(selection(&[e(3), e(2)]).unwrap_err().seq, 2);
        assert_eq!(selection(&[e(3), e(3)]).unwrap_err().seq, 3);
    }

    #[test]
    fn an_entry_is_json_with_the_record_flattened() {
        let entry = &chain(1)[0];
        let json = serde_json::to_value(entry).unwrap();
        assert_eq!(json["name"], "subscription.create");
        assert_eq!(json["prev_hash"], GENESIS);
        let back: AuditEntry = serde_json::from_value(json).unwrap();
        assert_eq!(&back, entry);
        assert!(back.is_intact());
    }
}
