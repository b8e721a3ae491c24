//! [`knooppunt_store::Cluster`] on the embedded store: one hub, and the sinks' pauses.

use super::*;

impl knooppunt_store::Cluster for EmbeddedStore {
    fn hubs_alive<'a>(&'a self, hub: &'a str, alive_ms: u64) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let now = std::time::Instant::now();
            let mut hubs = self.inner.hubs.lock().unwrap_or_else(|p| p.into_inner());
            hubs.insert(hub.to_owned(), now);
            let alive = std::time::Duration::from_millis(alive_ms);
            hubs.retain(|_, seen| now.duration_since(*seen) <= alive);
            Ok(hubs.keys().cloned().collect())
        })
    }

    fn hub_leaves<'a>(&'a self, hub: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut hubs = self.inner.hubs.lock().unwrap_or_else(|p| p.into_inner());
            hubs.remove(hub);
            Ok(())
        })
    }

    fn pause_sink<'a>(&'a self, sink: &'a str, until_ms: u64) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut pauses = self.sink_pauses();
            let until = pauses.entry(sink.to_owned()).or_insert(until_ms);
            *until = (*until).max(until_ms);
            Ok(())
        })
    }

    fn sinks_paused(&self, now_ms: u64) -> StoreFuture<'_, Vec<(String, u64)>> {
        Box::pin(async move {
            let mut pauses = self.sink_pauses();
            pauses.retain(|_, until| *until > now_ms);
            Ok(pauses
                .iter()
                .map(|(sink, until)| (sink.clone(), *until))
                .collect())
        })
    }
}
