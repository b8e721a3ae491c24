//! [`knooppunt_store::Cluster`] on PostgreSQL: the hubs alive and the sinks' pauses.

use super::*;

impl knooppunt_store::Cluster for PgStore {
    fn hubs_alive<'a>(&'a self, hub: &'a str, alive_ms: u64) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let client = self.client().await?;
            // One round trip: said alive, the silent forgotten, the rest listed (the
            // statements of one query string see each other's changes).
            let rows = client
                .query(
                    "WITH said AS (
                         INSERT INTO hubs (id, seen) VALUES ($1, clock_timestamp())
                         ON CONFLICT (id) DO UPDATE SET seen = excluded.seen
                         RETURNING id),
                     forgotten AS (
                         DELETE FROM hubs
                          WHERE seen < clock_timestamp() - $2::bigint * interval '1 millisecond'
                            AND id <> $1
                         RETURNING id)
                     SELECT id FROM hubs WHERE id NOT IN (SELECT id FROM forgotten)
                     UNION SELECT id FROM said
                     ORDER BY id",
                    &[&hub, &(alive_ms as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }

    fn hub_applied<'a>(&'a self, hub: &'a str, version: u64) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            client
                .execute(
                    "INSERT INTO hubs (id, seen, applied) VALUES ($1, clock_timestamp(), $2)
                     ON CONFLICT (id) DO UPDATE
                        SET applied = GREATEST(hubs.applied, excluded.applied)",
                    &[&hub, &(version as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn hubs_behind<'a>(
        &'a self,
        hub: &'a str,
        version: u64,
        alive_ms: u64,
    ) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT id FROM hubs
                      WHERE id <> $1 AND applied < $2
                        AND seen >= clock_timestamp() - $3::bigint * interval '1 millisecond'
                      ORDER BY id",
                    &[&hub, &(version as i64), &(alive_ms as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }

    fn hub_leaves<'a>(&'a self, hub: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            client
                .execute("DELETE FROM hubs WHERE id = $1", &[&hub])
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn pause_sink<'a>(&'a self, sink: &'a str, until_ms: u64) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            // Kept and told to every hub in one statement (the notice goes at its commit),
            // with the pause that holds: a shorter one never replaces a longer one.
            client
                .execute(
                    "WITH kept AS (
                         INSERT INTO sink_pauses (sink, until) VALUES ($1, $2)
                         ON CONFLICT (sink)
                         DO UPDATE SET until = GREATEST(sink_pauses.until, excluded.until)
                         RETURNING until)
                     SELECT pg_notify($3, 'p' || kept.until || E'\n' || $1) FROM kept",
                    &[&sink, &(until_ms as i64), &notify::CHANNEL],
                )
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn sinks_paused(&self, now_ms: u64) -> StoreFuture<'_, Vec<(String, u64)>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(
                    "WITH ended AS (DELETE FROM sink_pauses WHERE until <= $1)
                     SELECT sink, until FROM sink_pauses WHERE until > $1 ORDER BY sink",
                    &[&(now_ms as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(names_and_numbers(&rows))
        })
    }

    fn subscriptions_version(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_one("SELECT subscriptions FROM versions", &[])
                .await
                .map_err(backend)?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    fn watch(&self, listener: knooppunt_store::ChangeListener) {
        let task = tokio::spawn(notify::listen(self.inner.database.clone(), listener));
        self.inner
            .listeners
            .lock()
            .expect("listeners lock")
            .push(task);
    }
}
