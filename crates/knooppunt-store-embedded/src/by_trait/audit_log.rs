//! [`knooppunt_store::AuditLog`] on the embedded store: the hash chain in its own tree.

use super::*;

impl knooppunt_store::AuditLog for EmbeddedStore {
    fn append_audit(&self, records: Vec<AuditRecord>) -> StoreFuture<'_, Vec<AuditEntry>> {
        Box::pin(async move {
            self.writable()?;
            let entries = {
                let _writer = self.inner.audit_writer.lock().expect("audit lock");
                let tree = &self.inner.trees.audit;
                let (mut seq, mut prev) = match tree.last().map_err(backend)? {
                    Some((_, bytes)) => {
                        let last = decode_audit(&bytes)?;
                        (last.seq, last.hash)
                    }
                    None => (0, knooppunt_store::GENESIS.to_owned()),
                };
                let mut entries = Vec::with_capacity(records.len());
                let mut batch = sled::Batch::default();
                for record in records {
                    seq += 1;
                    let entry = AuditEntry::seal(seq, record, &prev);
                    prev.clone_from(&entry.hash);
                    batch.insert(
                        &seq.to_be_bytes(),
                        serde_json::to_vec(&entry).expect("entries always serialise"),
                    );
                    entries.push(entry);
                }
                tree.apply_batch(batch).map_err(backend)?;
                entries
            };
            self.commit().await?;
            Ok(entries)
        })
    }

    fn audit_entries(&self, range: AuditRange) -> StoreFuture<'_, Vec<AuditEntry>> {
        Box::pin(async move {
            let start = range.after.map_or(0, |after| after.saturating_add(1));
            self.inner
                .trees
                .audit
                .range(start.to_be_bytes()..)
                .values()
                .take(range.limit)
                .map(|bytes| decode_audit(&bytes.map_err(backend)?))
                .collect()
        })
    }

    fn audit_last(&self) -> StoreFuture<'_, Option<AuditEntry>> {
        Box::pin(async move {
            match self.inner.trees.audit.last().map_err(backend)? {
                Some((_, bytes)) => decode_audit(&bytes).map(Some),
                None => Ok(None),
            }
        })
    }

    fn remove_audit_through(&self, through: u64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            self.writable()?;
            let mut removed = 0;
            {
                let _writer = self.inner.audit_writer.lock().expect("audit lock");
                let tree = &self.inner.trees.audit;
                // The newest entry stays: it carries the chain on.
                let Some((last, _)) = tree.last().map_err(backend)? else {
                    return Ok(0);
                };
                let mut batch = sled::Batch::default();
                for key in tree.range(..=through.to_be_bytes()).keys() {
                    let key = key.map_err(backend)?;
                    if key == last {
                        break;
                    }
                    batch.remove(key);
                    removed += 1;
                }
                // One batch: a crash removes all of them or none.
                tree.apply_batch(batch).map_err(backend)?;
            }
            if removed > 0 {
                self.commit().await?;
            }
            Ok(removed)
        })
    }
}
