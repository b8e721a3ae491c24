//! Owners told of trouble on the real binary, on the embedded store and on PostgreSQL: a
//! sink that answers 410 disables its subscription, and the owner's pull subscription to
//! the hub's notices receives `nl.knooppunt.subscription.disabled` about it (the notices'
//! other kinds and who may see them: `tests/scenarios/notices.rs`).

mod common;

use std::time::{Duration, Instant};

use common::{Backend, HubProcess, config_with_admin};
use knooppunt_tests::sink::{Reply, Sink};
use serde_json::{Value, json};

const TOKEN: &str = "notices-admin";
const TYPE: &str = "nl.test.notices";

async fn create(client: &reqwest::Client, hub: &HubProcess, body: Value) -> String {
    common::create_subscription(client, hub, TOKEN, &body).await
}

async fn a_disabled_subscription_is_told_to_its_owner(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_admin(dir.path(), TOKEN);
    let hub = backend.hub_with(&config, dir.path(), "a");
    let client = reqwest::Client::new();
    let inbox = create(
        &client,
        &hub,
        json!({"protocol": "HTTP",
               "filters": [{"prefix": {"type": "nl.knooppunt.subscription."}}],
               "config": {"delivery": "pull", "ordering": "unordered"}}),
    )
    .await;
    let gone = Sink::start_for_any_hub().await;
    gone.answer_always(Reply::status(410));
    let disabled = create(
        &client,
        &hub,
        json!({"sink": gone.url, "protocol": "HTTP", "types": [TYPE]}),
    )
    .await;
    common::publish_batch(
        &client,
        &hub,
        TOKEN,
        vec![json!({"specversion": "1.0", "id": "n-1", "type": TYPE,
                    "source": "urn:nld:oin:1:systeem:notices", "data": {"n": 1}})],
    )
    .await;

    let deadline = Instant::now() + Duration::from_secs(20);
    let notice = loop {
        let told = common::drain(&client, &hub, TOKEN, &inbox).await;
        if let Some(notice) = told.into_iter().find(|n| {
            n["type"] == "nl.knooppunt.subscription.disabled" && n["subject"] == disabled.as_str()
        }) {
            break notice;
        }
        assert!(
            Instant::now() < deadline,
            "no notice of the disabled subscription"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(notice["data"]["state"], "disabled");
    assert!(
        notice["data"]["reason"].as_str().unwrap().contains("410"),
        "{notice}"
    );
    assert_eq!(notice["recipient"], "admin");
    assert!(
        notice["source"]
            .as_str()
            .unwrap()
            .starts_with("urn:nld:knooppunt:"),
        "{notice}"
    );
    eprintln!("{}: the owner was told", backend.name());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_subscription_is_told_to_its_owner_on_the_embedded_store() {
    a_disabled_subscription_is_told_to_its_owner(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_subscription_is_told_to_its_owner_on_postgres() {
    a_disabled_subscription_is_told_to_its_owner(Backend::postgres("notices")).await;
}
