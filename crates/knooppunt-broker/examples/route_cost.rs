//! Measures the CPU cost of one publish through the router, without the network:
//! `cargo run --release -p knooppunt-broker --example route_cost`.

#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use http::Request;
use knooppunt_broker::{Authentication, Hub, HubOptions};
use knooppunt_store::SledStore;
use tower::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    let options = HubOptions::new(Authentication::Disabled);
    let hub = Hub::open(Arc::new(store), options).await.unwrap();
    let router = hub.router();
    let filler = "x".repeat(850);
    let n = 20_000u32;
    let started = Instant::now();
    for i in 0..n {
        let body = format!(
            r#"{{"specversion":"1.0","id":"r-{i}","source":"urn:nld:oin:1:systeem:bench","type":"nl.bench.type1","data":{{"filler":"{filler}"}}}}"#
        );
        let request = Request::post("/v1/events")
            .header("content-type", "application/cloudevents+json")
            .body(Body::from(body))
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), 202);
        let _ = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
    }
    println!(
        "{:?} per publish (durable, one at a time)",
        started.elapsed() / n
    );
}
