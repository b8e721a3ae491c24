//! The embedded store passes the store conformance suite.

use std::sync::Arc;

use knooppunt_store::Inspect;
use knooppunt_store_conformance::{Backend, run};
use knooppunt_store_embedded::EmbeddedStore;

/// Each store in a directory of its own, reopened on the same directory.
#[derive(Default)]
struct Embedded {
    directories: Vec<tempfile::TempDir>,
}

impl Backend for Embedded {
    async fn open(&mut self) -> Arc<dyn Inspect> {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        self.directories.push(dir);
        Arc::new(store)
    }

    async fn reopen(&mut self, store: Arc<dyn Inspect>) -> Arc<dyn Inspect> {
        drop(store);
        let dir = self.directories.last().expect("opened before").path();
        Arc::new(EmbeddedStore::open(dir).unwrap())
    }
}

#[tokio::test]
async fn the_embedded_store_conforms() {
    run(&mut Embedded::default()).await;
}
