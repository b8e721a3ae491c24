//! [`knooppunt_store::EventLog`] on PostgreSQL: events appended once with their
//! deliveries, read in order, receipts, the retention sweep.

use super::*;

impl knooppunt_store::EventLog for PgStore {
    fn append_events(
        &self,
        events: Vec<NewEvent>,
        now_ms: u64,
        dedupe_window_ms: u64,
    ) -> StoreFuture<'_, Vec<Appended>> {
        Box::pin(async move {
            let (answers, events) = self
                .inner
                .appender
                .append(events, now_ms, dedupe_window_ms)
                .await?;
            // What will be delivered is kept for the deliveries: this hub reads none of it
            // back unless it was pushed out of the cache meanwhile.
            for (answer, event) in answers.iter().zip(events) {
                if let Appended::Accepted { seq } = *answer
                    && !event.subscriptions.is_empty()
                {
                    self.inner.events.insert(StoredEvent {
                        seq,
                        source: event.source,
                        id: event.id,
                        accepted_at: now_ms,
                        json: event.json,
                        extension_types: event.extension_types,
                    });
                }
            }
            Ok(answers)
        })
    }

    fn event(&self, seq: u64) -> StoreFuture<'_, Option<Arc<StoredEvent>>> {
        Box::pin(async move {
            self.inner
                .events
                .get_or_read(seq, || async {
                    let client = self.client().await?;
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT {EVENT_COLUMNS} FROM events WHERE seq = $1"
                        ))
                        .await
                        .map_err(backend)?;
                    let row = client
                        .query_opt(&statement, &[&(seq as i64)])
                        .await
                        .map_err(backend)?;
                    Ok(row.as_ref().map(stored_event))
                })
                .await
        })
    }

    fn events_after(&self, after: u64, limit: usize) -> StoreFuture<'_, Vec<Arc<StoredEvent>>> {
        Box::pin(async move {
            let client = self.client().await?;
            // Numbers follow transaction ids (both taken under the append lock), so the
            // events of transactions older than every running one are a prefix: nothing can
            // still appear before them.
            let statement = client
                .prepare_cached(&format!(
                    "SELECT {EVENT_COLUMNS} FROM events \
                     WHERE seq > $1 \
                       AND (xid IS NULL OR xid < pg_snapshot_xmin(pg_current_snapshot())) \
                     ORDER BY seq LIMIT $2"
                ))
                .await
                .map_err(backend)?;
            let rows = client
                .query(&statement, &[&(after as i64), &(limit as i64)])
                .await
                .map_err(backend)?;
            Ok(rows.iter().map(|row| Arc::new(stored_event(row))).collect())
        })
    }

    fn swept_through(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_one("SELECT through FROM swept", &[])
                .await
                .map_err(backend)?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    fn seq_before(&self, at_ms: u64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_one(
                    "SELECT GREATEST(COALESCE( \
                       (SELECT min(seq) - 1 FROM events WHERE accepted_at >= $1), \
                       (SELECT max(seq) FROM events), 0), (SELECT through FROM swept))",
                    &[&(at_ms as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    fn receipts_of_event(&self, seq: u64) -> StoreFuture<'_, Vec<Receipt>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT seq, subscription, delivered_at FROM receipts WHERE seq = $1 \
                     ORDER BY subscription COLLATE \"C\"",
                    &[&(seq as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(rows.iter().map(receipt).collect())
        })
    }

    fn receipts_of_subscription<'a>(
        &'a self,
        subscription: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> StoreFuture<'a, (Vec<Receipt>, Option<String>)> {
        Box::pin(async move {
            let (at, seq) = match after {
                None => (-1, -1),
                Some(cursor) => cursor
                    .split_once('.')
                    .and_then(|(a, s)| Some((a.parse::<i64>().ok()?, s.parse::<i64>().ok()?)))
                    .ok_or_else(|| {
                        StoreError::Corrupt(format!("`{cursor}` is not a receipt cursor"))
                    })?,
            };
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT seq, subscription, delivered_at FROM receipts \
                     WHERE subscription = $1 AND (delivered_at, seq) > ($2, $3) \
                     ORDER BY delivered_at, seq LIMIT $4",
                    &[&subscription, &at, &seq, &(limit as i64)],
                )
                .await
                .map_err(backend)?;
            let receipts: Vec<Receipt> = rows.iter().map(receipt).collect();
            let next = receipts
                .last()
                .filter(|_| receipts.len() == limit)
                .map(|r| format!("{}.{}", r.delivered_at, r.seq));
            Ok((receipts, next))
        })
    }

    fn sweep_receipts(&self, before_ms: u64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            client
                .execute(
                    "DELETE FROM receipts WHERE delivered_at < $1",
                    &[&(before_ms.min(i64::MAX as u64) as i64)],
                )
                .await
                .map_err(backend)
        })
    }

    fn sweep(
        &self,
        now_ms: u64,
        retention_ms: u64,
        dedupe_window_ms: u64,
    ) -> StoreFuture<'_, Swept> {
        Box::pin(async move {
            let client = self.client().await?;
            // Every subscription that has deliveries or dead letters, one index probe each
            // (a loose scan of the primary keys), with the oldest event it still needs.
            let needed = |table: &str| {
                format!(
                    "WITH RECURSIVE subs AS ( \
                       (SELECT subscription FROM {table} ORDER BY subscription LIMIT 1) \
                       UNION ALL \
                       SELECT (SELECT t.subscription FROM {table} t \
                               WHERE t.subscription > subs.subscription \
                               ORDER BY t.subscription LIMIT 1) \
                       FROM subs WHERE subs.subscription IS NOT NULL) \
                     SELECT subs.subscription, \
                       (SELECT min(t.seq) FROM {table} t WHERE t.subscription = subs.subscription), \
                       EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = subs.subscription) \
                     FROM subs WHERE subs.subscription IS NOT NULL"
                )
            };
            let mut oldest_needed: Option<i64> = None;
            for table in ["deliveries", "dead_letters"] {
                let rows = client.query(&needed(table), &[]).await.map_err(backend)?;
                for row in rows {
                    let subscription: String = row.get(0);
                    if !row.get::<_, bool>(2) {
                        // Queued by an append that raced the subscription's deletion.
                        client
                            .execute(
                                &format!("DELETE FROM {table} WHERE subscription = $1"),
                                &[&subscription],
                            )
                            .await
                            .map_err(backend)?;
                        continue;
                    }
                    let seq: i64 = row.get(1);
                    oldest_needed = Some(oldest_needed.map_or(seq, |o| o.min(seq)));
                }
            }
            // Events go once both the retention and the duplicate window have passed and no
            // delivery or dead letter needs them or any later event (as the embedded store
            // keeps whole segments); in slices, so that no statement holds many locks.
            let cutoff = now_ms.saturating_sub(retention_ms.max(dedupe_window_ms)) as i64;
            let below = oldest_needed.unwrap_or(i64::MAX);
            let mut swept = Swept::default();
            loop {
                let row = client
                    .query_one(
                        "WITH gone AS (DELETE FROM events WHERE seq IN ( \
                           SELECT seq FROM events WHERE seq < $2 AND accepted_at < $1 \
                           ORDER BY seq LIMIT 5000) RETURNING seq), \
                         noted AS (UPDATE swept SET through = GREATEST(through, \
                           (SELECT max(seq) FROM gone)) WHERE EXISTS (SELECT 1 FROM gone)) \
                         SELECT count(*) FROM gone",
                        &[&cutoff, &below],
                    )
                    .await
                    .map_err(backend)?;
                let removed = row.get::<_, i64>(0) as u64;
                swept.events += removed;
                if removed < 5000 {
                    break;
                }
            }
            // Duplicate detection forgets identities past the window, in slices too.
            let forget = now_ms.saturating_sub(dedupe_window_ms) as i64;
            loop {
                let forgotten = client
                    .execute(
                        "DELETE FROM identities WHERE ctid = ANY (ARRAY( \
                           SELECT ctid FROM identities WHERE accepted_at < $1 LIMIT 5000))",
                        &[&forget],
                    )
                    .await
                    .map_err(backend)?;
                swept.dedupe_entries += forgotten;
                if forgotten < 5000 {
                    break;
                }
            }
            Ok(swept)
        })
    }
}

fn receipt(row: &Row) -> Receipt {
    Receipt {
        seq: row.get::<_, i64>(0) as u64,
        subscription: row.get(1),
        delivered_at: row.get::<_, i64>(2) as u64,
    }
}
