//! Many writers, one fsync: a writer whose write is already covered by a finished flush
//! returns at once; otherwise one writer flushes for everyone who wrote before it started.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

use knooppunt_store::StoreError;

#[derive(Debug, Default)]
pub(super) struct GroupCommit {
    written: AtomicU64,
    flushed: AtomicU64,
    flushing: tokio::sync::Mutex<()>,
}

impl GroupCommit {
    /// Call after a write is applied; returns when a `flush` that started after the write
    /// has finished.
    pub(super) async fn commit<F, Fut>(&self, flush: F) -> Result<(), StoreError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(), StoreError>>,
    {
        let mine = self.written.fetch_add(1, Ordering::SeqCst) + 1;
        let _flushing = self.flushing.lock().await;
        if self.flushed.load(Ordering::SeqCst) >= mine {
            return Ok(());
        }
        let target = self.written.load(Ordering::SeqCst);
        flush().await?;
        self.flushed.fetch_max(target, Ordering::SeqCst);
        Ok(())
    }
}
