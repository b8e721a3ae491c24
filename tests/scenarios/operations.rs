//! Operating the hub: health and readiness.

use knooppunt_tests::{Answer, TestHub};

#[tokio::test]
async fn health_and_readiness_need_no_token_and_say_what_is_wrong() {
    let hub = TestHub::start().await;
    let get = |path: &str| hub.client.get(hub.url(path)).send();
    let health = Answer::from(get("/healthz").await.unwrap()).await;
    assert_eq!(health.status, 200);
    assert_eq!(health.body["status"], "up");
    let ready = Answer::from(get("/readyz").await.unwrap()).await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert_eq!(ready.body["checks"]["store"], "ok");
    assert_eq!(ready.body["checks"]["delivery"], "running");

    // Stopping the workers (as a shutdown does) makes the hub unready, still healthy.
    hub.hub.stop().await;
    let unready = Answer::from(get("/readyz").await.unwrap())
        .await
        .assert_problem(503);
    assert_eq!(unready.body["checks"]["delivery"], "stopped");
    assert!(
        unready.body["detail"]
            .as_str()
            .unwrap()
            .contains("delivery workers: stopped")
    );
    assert_eq!(
        Answer::from(get("/healthz").await.unwrap()).await.status,
        200
    );
}
