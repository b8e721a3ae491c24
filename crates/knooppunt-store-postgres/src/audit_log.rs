//! [`knooppunt_store::AuditLog`] on PostgreSQL: the hash chain, one row per entry.

use super::*;

impl knooppunt_store::AuditLog for PgStore {
    fn append_audit(&self, records: Vec<AuditRecord>) -> StoreFuture<'_, Vec<AuditEntry>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let transaction = client.transaction().await.map_err(backend)?;
            // The head row is the chain's lock: hubs append one after another.
            let head = transaction
                .query_one("SELECT seq, hash FROM audit_head FOR UPDATE", &[])
                .await
                .map_err(backend)?;
            let (mut seq, mut prev) = (head.get::<_, i64>(0) as u64, head.get::<_, String>(1));
            let mut entries = Vec::with_capacity(records.len());
            let insert = transaction
                .prepare("INSERT INTO audit (seq, start_time, entry) VALUES ($1, $2, $3)")
                .await
                .map_err(backend)?;
            for record in records {
                seq += 1;
                let entry = AuditEntry::seal(seq, record, &prev);
                prev.clone_from(&entry.hash);
                let text = serde_json::to_string(&entry).expect("entries always serialise");
                transaction
                    .execute(
                        &insert,
                        &[&(seq as i64), &(entry.record.start_time as i64), &text],
                    )
                    .await
                    .map_err(backend)?;
                entries.push(entry);
            }
            transaction
                .execute(
                    "UPDATE audit_head SET seq = $1, hash = $2",
                    &[&(seq as i64), &prev],
                )
                .await
                .map_err(backend)?;
            transaction.commit().await.map_err(backend)?;
            Ok(entries)
        })
    }

    fn audit_entries(&self, range: AuditRange) -> StoreFuture<'_, Vec<AuditEntry>> {
        Box::pin(async move {
            let client = self.client().await?;
            let after = range.after.map_or(0, |a| a as i64);
            let rows = client
                .query(
                    "SELECT entry FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2",
                    &[&after, &(range.limit as i64)],
                )
                .await
                .map_err(backend)?;
            rows.iter()
                .map(|row| {
                    serde_json::from_str(row.get::<_, &str>(0)).map_err(|error| {
                        StoreError::Corrupt(format!("an audit entry is unreadable: {error}"))
                    })
                })
                .collect()
        })
    }

    fn audit_last(&self) -> StoreFuture<'_, Option<AuditEntry>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt("SELECT entry FROM audit ORDER BY seq DESC LIMIT 1", &[])
                .await
                .map_err(backend)?;
            row.map(|row| {
                serde_json::from_str(row.get::<_, &str>(0)).map_err(|error| {
                    StoreError::Corrupt(format!("an audit entry is unreadable: {error}"))
                })
            })
            .transpose()
        })
    }

    fn remove_audit_through(&self, through: u64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            // Never the newest entry: the trail stays one chain.
            let removed = client
                .execute(
                    "DELETE FROM audit WHERE seq <= $1 AND seq < (SELECT max(seq) FROM audit)",
                    &[&(through.min(i64::MAX as u64) as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(removed)
        })
    }
}
