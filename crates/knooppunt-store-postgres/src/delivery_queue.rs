//! [`knooppunt_store::DeliveryQueue`] on PostgreSQL: leases, results, dead letters.

use super::*;

/// The class of the advisory locks an ordered subscription's leases take, one per
/// subscription (`KPOR` in ASCII; two-key locks do not meet the one-key ones of appends and
/// migrations).
const ORDERED_LOCK: i32 = 0x4B50_4F52;

impl knooppunt_store::DeliveryQueue for PgStore {
    fn lease<'a>(
        &'a self,
        subscription: &'a str,
        now_ms: u64,
        lease_ms: u64,
        limit: usize,
        ordered: bool,
    ) -> StoreFuture<'a, Vec<Delivery>> {
        Box::pin(async move {
            if limit == 0 {
                return Ok(Vec::new());
            }
            let client = self.client().await?;
            let (now, until) = (now_ms as i64, (now_ms + lease_ms) as i64);
            let rows = if ordered {
                // The oldest and those after it in a row, as long as each is due and not
                // leased, and only once every transaction older than the one that queued it
                // has ended (numbers follow transaction ids, so no smaller number can appear
                // after it). Hubs take the subscription's ordered lock first (for this
                // transaction), so the window is reckoned on what the last one leased; the
                // statement after the lock sees it (a snapshot of its own).
                let lock = client
                    .prepare_cached("SELECT pg_advisory_xact_lock($1, hashtext($2))")
                    .await
                    .map_err(backend)?;
                let statement = client
                    .prepare_cached(&format!(
                        "UPDATE deliveries SET leased_until = $3, \
                           lease = nextval('lease_tokens'), \
                           attempts = attempts + (leased_until > 0)::int \
                         WHERE subscription = $1 AND seq = ANY(ARRAY( \
                           SELECT seq FROM (SELECT seq, bool_and( \
                               GREATEST(next_attempt_at, leased_until) <= $2 \
                               AND xid < pg_snapshot_xmin(pg_current_snapshot())) \
                               OVER (ORDER BY seq) AS available \
                             FROM (SELECT seq, next_attempt_at, leased_until, xid \
                               FROM deliveries WHERE subscription = $1 \
                               ORDER BY seq LIMIT $4) oldest) in_a_row \
                           WHERE available)) \
                         RETURNING {DELIVERY_COLUMNS}"
                    ))
                    .await
                    .map_err(backend)?;
                // Its results do not wait for company.
                self.inner.cursors.forget(subscription);
                // Durable: an ordered subscription's lease is what keeps a second copy of
                // its oldest events from being sent beside the first after a database crash.
                locked_transaction(
                    &client,
                    (&lock, &[&ORDERED_LOCK, &subscription]),
                    &statement,
                    &[&subscription, &now, &until, &(limit as i64)],
                )
                .await?
            } else {
                // The available ones in number order, through the primary key, first those
                // after this hub's last lease of the subscription, then from the start of
                // its queue only if those were not enough (see `Cursor`; the second part
                // is not run when the first found `limit`; the row locks are taken in
                // sub-selects, as `UNION` allows none of its own). Rows another hub is
                // leasing are skipped, not waited for. (One UPDATE without the row locks was
                // slower: it waits for rows whose results are being committed.) The rows
                // picked are updated where they are (their `ctid`, which their lock keeps),
                // not looked up again: a join back by key walked the queue's head once per
                // row picked.
                let statement = client
                    .prepare_cached(&format!(
                        "UPDATE deliveries SET leased_until = $3, \
                           lease = nextval('lease_tokens'), \
                           attempts = attempts + (leased_until > 0)::int \
                         WHERE ctid = ANY(ARRAY( \
                           SELECT ctid FROM (SELECT ctid FROM deliveries \
                             WHERE subscription = $1 AND seq > $5 \
                               AND GREATEST(next_attempt_at, leased_until) <= $2 \
                             ORDER BY seq \
                             LIMIT $4 FOR UPDATE SKIP LOCKED) after_cursor \
                           UNION ALL \
                           SELECT ctid FROM (SELECT ctid FROM deliveries \
                             WHERE subscription = $1 AND seq <= $5 \
                               AND GREATEST(next_attempt_at, leased_until) <= $2 \
                             ORDER BY seq \
                             LIMIT $4 FOR UPDATE SKIP LOCKED) from_start \
                           LIMIT $4)) \
                         RETURNING {DELIVERY_COLUMNS}"
                    ))
                    .await
                    .map_err(backend)?;
                let after = self.inner.cursors.start(subscription);
                let rows = without_flush(
                    &client,
                    &statement,
                    &[&subscription, &now, &until, &(limit as i64), &after],
                )
                .await?;
                let last = rows.iter().map(|row| row.get::<_, i64>("seq")).max();
                self.inner.cursors.moved(subscription, after, last);
                rows
            };
            let mut leased: Vec<Delivery> = rows.iter().map(delivery).collect();
            leased.sort_by_key(|d| d.seq);
            self.read_ahead(&client, &leased).await;
            Ok(leased)
        })
    }

    fn renew<'a>(
        &'a self,
        subscription: &'a str,
        seq: u64,
        lease: u64,
        until_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let client = self.client().await?;
            let renewed = client
                .execute(
                    "UPDATE deliveries SET leased_until = $4 \
                     WHERE subscription = $1 AND seq = $2 AND lease = $3 AND lease <> 0",
                    &[
                        &subscription,
                        &(seq as i64),
                        &(lease as i64),
                        &(until_ms as i64),
                    ],
                )
                .await
                .map_err(backend)?;
            Ok(renewed == 1)
        })
    }

    fn release<'a>(
        &'a self,
        subscription: &'a str,
        leases: &'a [(u64, u64)],
    ) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            if leases.is_empty() {
                return Ok(0);
            }
            let client = self.client().await?;
            let (seqs, tokens): (Vec<i64>, Vec<i64>) = leases
                .iter()
                .map(|&(seq, lease)| (seq as i64, lease as i64))
                .unzip();
            let statement = client
                .prepare_cached(
                    "UPDATE deliveries d SET leased_until = 0, lease = 0 \
                     FROM UNNEST($2::bigint[], $3::bigint[]) AS given(seq, lease) \
                     WHERE d.subscription = $1 AND d.seq = given.seq \
                       AND d.lease = given.lease AND d.lease <> 0 \
                     RETURNING d.seq",
                )
                .await
                .map_err(backend)?;
            // Like a lease, a release need not wait for the WAL: one a crash forgets runs
            // out instead (and then counts as an attempt).
            let given =
                without_flush(&client, &statement, &[&subscription, &seqs, &tokens]).await?;
            Ok(given.len() as u64)
        })
    }

    fn next_due<'a>(
        &'a self,
        subscription: &'a str,
        ordered: bool,
    ) -> StoreFuture<'a, Option<u64>> {
        Box::pin(async move {
            let client = self.client().await?;
            // The second column: whether every older transaction has ended (see `lease`).
            let sql = if ordered {
                "SELECT GREATEST(next_attempt_at, leased_until), \
                   xid < pg_snapshot_xmin(pg_current_snapshot()) FROM deliveries \
                 WHERE subscription = $1 ORDER BY seq LIMIT 1"
            } else {
                "SELECT min(GREATEST(next_attempt_at, leased_until)), true FROM deliveries \
                 WHERE subscription = $1 HAVING count(*) > 0"
            };
            let statement = client.prepare_cached(sql).await.map_err(backend)?;
            let rows = in_transaction(&client, &statement, &[&subscription], true).await?;
            let row = rows.into_iter().next();
            Ok(row.map(|row| {
                let due = row.get::<_, i64>(0) as u64;
                if row.get::<_, bool>(1) {
                    due
                } else {
                    // An older append is still committing: look again in a moment.
                    due.max(knooppunt_store::now_ms() + 10)
                }
            }))
        })
    }

    fn record(&self, changes: Vec<DeliveryChange>) -> StoreFuture<'_, ()> {
        self.record_with(changes, true)
    }

    fn record_results(&self, changes: Vec<DeliveryChange>) -> StoreFuture<'_, ()> {
        self.record_with(changes, false)
    }

    fn sweep_dead_letters(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<(String, u64)>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(
                    "WITH gone AS (DELETE FROM dead_letters WHERE (subscription, seq) IN \
                     (SELECT subscription, seq FROM dead_letters WHERE dead_at < $1 \
                      ORDER BY dead_at LIMIT $2) RETURNING subscription) \
                     SELECT subscription, count(*) FROM gone GROUP BY subscription \
                     ORDER BY subscription",
                    &[
                        &(before_ms.min(i64::MAX as u64) as i64),
                        &(limit.min(i64::MAX as usize) as i64),
                    ],
                )
                .await
                .map_err(backend)?;
            Ok(names_and_numbers(&rows))
        })
    }

    fn pending_seqs<'a>(
        &'a self,
        subscription: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<u64>> {
        Box::pin(async move {
            let client = self.client().await?;
            let after = after.map_or(-1, |a| a as i64);
            // By key whatever the statistics say: shedding walks a huge backlog this way.
            let statement = client
                .prepare_cached(
                    "SELECT seq FROM deliveries WHERE subscription = $1 AND seq > $2 \
                     ORDER BY seq LIMIT $3",
                )
                .await
                .map_err(backend)?;
            let params: [Param<'_>; 3] = [&subscription, &after, &(limit as i64)];
            let rows = in_transaction(&client, &statement, &params, true).await?;
            Ok(rows.iter().map(|r| r.get::<_, i64>(0) as u64).collect())
        })
    }

    fn dead_letters<'a>(
        &'a self,
        subscription: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<DeadLetter>> {
        Box::pin(async move {
            let client = self.client().await?;
            let sql = format!(
                "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters \
                 WHERE subscription = $1 AND seq > $2 ORDER BY seq LIMIT $3"
            );
            let after = after.map_or(-1, |a| a as i64);
            let statement = client.prepare_cached(&sql).await.map_err(backend)?;
            let params: [Param<'_>; 3] = [&subscription, &after, &(limit as i64)];
            let rows = in_transaction(&client, &statement, &params, true).await?;
            Ok(rows.iter().map(dead_letter).collect())
        })
    }

    fn dead_letter<'a>(
        &'a self,
        subscription: &'a str,
        seq: u64,
    ) -> StoreFuture<'a, Option<DeadLetter>> {
        Box::pin(async move {
            let client = self.client().await?;
            let sql = format!(
                "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters WHERE subscription = $1 AND seq = $2"
            );
            let row = client
                .query_opt(&sql, &[&subscription, &(seq as i64)])
                .await
                .map_err(backend)?;
            Ok(row.as_ref().map(dead_letter))
        })
    }

    fn queue_stats(&self) -> StoreFuture<'_, Vec<QueueStats>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT s.id, COALESCE(p.pending, 0), e.accepted_at, COALESCE(d.dead, 0), \
                       COALESCE(p.leased, 0), COALESCE(p.bytes, 0)::bigint \
                     FROM subscriptions s \
                     LEFT JOIN (SELECT subscription, count(*) AS pending, min(seq) AS first, \
                                       sum(bytes) AS bytes, \
                                       count(*) FILTER (WHERE lease <> 0 \
                                         AND leased_until > $1) AS leased \
                                FROM deliveries GROUP BY subscription) p ON p.subscription = s.id \
                     LEFT JOIN events e ON e.seq = p.first \
                     LEFT JOIN (SELECT subscription, count(*) AS dead FROM dead_letters \
                                GROUP BY subscription) d ON d.subscription = s.id \
                     ORDER BY s.id",
                    &[&(knooppunt_store::now_ms() as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(rows
                .iter()
                .map(|row| QueueStats {
                    subscription: row.get(0),
                    pending: row.get::<_, i64>(1) as u64,
                    oldest_accepted_at: row.get::<_, Option<i64>>(2).map(|v| v as u64),
                    dead_letters: row.get::<_, i64>(3) as u64,
                    leased: row.get::<_, i64>(4) as u64,
                    pending_bytes: row.get::<_, i64>(5) as u64,
                })
                .collect())
        })
    }

    fn queue_stats_of<'a>(&'a self, subscription: &'a str) -> StoreFuture<'a, Option<QueueStats>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT \
                       (SELECT count(*) FROM deliveries WHERE subscription = s.id), \
                       (SELECT e.accepted_at FROM events e WHERE e.seq = \
                          (SELECT min(seq) FROM deliveries WHERE subscription = s.id)), \
                       (SELECT count(*) FROM dead_letters WHERE subscription = s.id), \
                       (SELECT count(*) FROM deliveries WHERE subscription = s.id \
                          AND lease <> 0 AND leased_until > $2), \
                       (SELECT COALESCE(sum(bytes), 0)::bigint FROM deliveries \
                          WHERE subscription = s.id) \
                     FROM subscriptions s WHERE s.id = $1",
                    &[&subscription, &(knooppunt_store::now_ms() as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(row.map(|row| QueueStats {
                subscription: subscription.to_owned(),
                pending: row.get::<_, i64>(0) as u64,
                oldest_accepted_at: row.get::<_, Option<i64>>(1).map(|v| v as u64),
                dead_letters: row.get::<_, i64>(2) as u64,
                leased: row.get::<_, i64>(3) as u64,
                pending_bytes: row.get::<_, i64>(4) as u64,
            }))
        })
    }
}
