//! The PostgreSQL store passes the store conformance suite, on a throwaway cluster.

use std::sync::Arc;

use knooppunt_store::Inspect;
use knooppunt_store_conformance::{Backend, run};
use knooppunt_store_postgres::{PgOptions, PgStore};
use knooppunt_test_postgres::Cluster;

/// Each store on a database of its own, reopened by connecting again.
struct Postgres {
    cluster: Cluster,
    databases: usize,
}

impl Backend for Postgres {
    async fn open(&mut self) -> Arc<dyn Inspect> {
        self.databases += 1;
        let url = self
            .cluster
            .create_database(&format!("conformance_{}", self.databases));
        Arc::new(PgStore::connect(&PgOptions::new(url)).await.unwrap())
    }

    async fn reopen(&mut self, store: Arc<dyn Inspect>) -> Arc<dyn Inspect> {
        drop(store);
        let url = self.cluster.url(&format!("conformance_{}", self.databases));
        Arc::new(PgStore::connect(&PgOptions::new(url)).await.unwrap())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_store_conforms() {
    let mut backend = Postgres {
        cluster: Cluster::start(),
        databases: 0,
    };
    run(&mut backend).await;
}
