//! `knooppunt backup --to DIR` on the real binary: a copy of the embedded store taken while
//! events are published, which a hub then opens as its data directory and delivers every
//! event acknowledged before the backup from; refusals (PostgreSQL, not an admin, a
//! directory in use) say what to do.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Backend, HubProcess, config_with_admin};
use serde_json::{Value, json};

const TOKEN: &str = "backup-admin";
const TYPE: &str = "nl.test.backup";

fn event(id: &str) -> Value {
    json!({"specversion": "1.0", "id": id, "source": "urn:nld:oin:1:systeem:backup",
           "type": TYPE, "data": {"id": id, "padding": "x".repeat(2000)}})
}

fn backup(hub: &HubProcess, token: &str, to: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_knooppunt"))
        .args(["backup", "--to"])
        .arg(to)
        .env("KNOOPPUNT_URL", hub.url(""))
        .env("KNOOPPUNT_TOKEN", token)
        .output()
        .unwrap()
}

async fn publish(client: &reqwest::Client, hub: &HubProcess, ids: &[String]) {
    for chunk in ids.chunks(100) {
        let batch = chunk.iter().map(|id| event(id)).collect();
        common::publish_batch(client, hub, TOKEN, batch).await;
    }
}

/// Every event of the pull subscription `id`, whole, by id.
async fn drain(client: &reqwest::Client, hub: &HubProcess, id: &str) -> BTreeSet<String> {
    let events = common::drain(client, hub, TOKEN, id).await;
    for event in &events {
        assert_eq!(event["data"]["padding"].as_str().unwrap().len(), 2000);
    }
    events
        .iter()
        .map(|event| event["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_events_are_published_restores_every_event_acknowledged_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_admin(dir.path(), TOKEN);
    let hub = HubProcess::start(&config, &dir.path().join("data"));
    let client = reqwest::Client::new();
    let created = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(TOKEN)
        .json(&json!({"protocol": "HTTP", "types": [TYPE],
                      "config": {"delivery": "pull", "ordering": "unordered"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let subscription = created.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let before: Vec<String> = (0..3000).map(|i| format!("before-{i}")).collect();
    publish(&client, &hub, &before).await;

    // Publishing goes on while the backup is taken.
    let publishing = Arc::new(AtomicBool::new(true));
    let during = {
        let (client, publishing) = (client.clone(), Arc::clone(&publishing));
        let url = hub.url("/v1/events");
        tokio::spawn(async move {
            let mut acknowledged = 0;
            while publishing.load(Ordering::Relaxed) {
                let id = format!("during-{acknowledged}");
                let answer = client
                    .post(&url)
                    .bearer_auth(TOKEN)
                    .header("content-type", "application/cloudevents+json")
                    .body(event(&id).to_string())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answer.status(), 202);
                acknowledged += 1;
            }
            acknowledged
        })
    };
    let copy = dir.path().join("copy");
    let taken = {
        let (address, copy) = (hub.url(""), copy.clone());
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_knooppunt"))
                .args(["backup", "--to"])
                .arg(&copy)
                .env("KNOOPPUNT_URL", address)
                .env("KNOOPPUNT_TOKEN", TOKEN)
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    };
    publishing.store(false, Ordering::Relaxed);
    let published_during = during.await.unwrap();
    assert!(
        published_during > 0,
        "the hub took publishes while it was backed up"
    );
    let said = String::from_utf8_lossy(&taken.stdout);
    assert!(taken.status.success(), "{taken:?}");
    assert!(said.contains("1 subscription(s)"), "{said}");
    assert!(said.contains("To restore"), "{said}");
    let summary: Value =
        serde_json::from_slice(&std::fs::read(copy.join("backup.json")).unwrap()).unwrap();
    assert!(
        summary["logBytes"].as_u64().unwrap() > 3000 * 2000,
        "{summary}"
    );

    // The hub recorded who took it, and what it holds.
    let mut recorded = Value::Null;
    for _ in 0..50 {
        let entries = common::get_json(&client, &hub, TOKEN, "/v1/audit?name=store").await;
        if let Some(entry) = entries.as_array().and_then(|e| e.first()) {
            recorded = entry.clone();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(recorded["name"], "store.backup", "{recorded}");
    assert_eq!(recorded["actor"], "admin", "{recorded}");
    assert_eq!(recorded["details"]["outcome"], "taken", "{recorded}");
    assert!(hub.terminate().success());

    // The copy is a data directory: a hub opens it as it is.
    let restored = HubProcess::start(&config, &copy);
    let received = drain(&client, &restored, &subscription).await;
    for id in &before {
        assert!(
            received.contains(id),
            "{id} was acknowledged before the backup"
        );
    }
    let later = received
        .iter()
        .filter(|id| id.starts_with("during-"))
        .count();
    assert!(later <= published_during, "{later} of {published_during}");
    let verified = common::get_json(&client, &restored, TOKEN, "/v1/audit/verify").await;
    assert_eq!(verified["intact"], true, "{verified}");
    assert!(restored.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_is_refused_with_what_to_do_instead() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_admin(dir.path(), TOKEN);
    let hub = HubProcess::start(&config, &dir.path().join("data"));
    let client = reqwest::Client::new();

    // Not into a directory that holds something.
    let used = dir.path().join("used");
    std::fs::create_dir_all(&used).unwrap();
    std::fs::write(used.join("keep.txt"), b"mine").unwrap();
    let refused = backup(&hub, TOKEN, &used);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is not empty"));
    assert_eq!(std::fs::read(used.join("keep.txt")).unwrap(), b"mine");

    // Only an administrator.
    let created = client
        .post(hub.url("/v1/principals"))
        .bearer_auth(TOKEN)
        .json(&json!({"name": "reader", "roles": ["subscriber"], "issueToken": true}))
        .send()
        .await
        .unwrap();
    let token = created.json::<Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let not_admin = backup(&hub, &token, &dir.path().join("mine"));
    assert_eq!(not_admin.status.code(), Some(1), "{not_admin:?}");
    assert!(String::from_utf8_lossy(&not_admin.stderr).contains("403"));
    assert!(!dir.path().join("mine").exists());
    assert!(hub.terminate().success());

    // A hub on PostgreSQL: pg_dump.
    let backend = Backend::postgres("backup");
    let on_postgres = backend.hub(dir.path(), "pg", TOKEN);
    let refused = backup(&on_postgres, TOKEN, &dir.path().join("pg-copy"));
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("409") && said.contains("pg_dump"), "{said}");
    assert!(on_postgres.terminate().success());
}
