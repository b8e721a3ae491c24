//! Upgrades: today's binary opens a data directory and a PostgreSQL database written by the
//! previous release (`fixtures/previous-release`, made by its `make.sh` with that release's
//! binary) and carries on: the principals, the catalog, the subscription, the events still
//! pending (and not those acknowledged), duplicate detection and the audit trail are there.
//! And a PostgreSQL hub's database, dumped with `pg_dump` and restored with `pg_restore`
//! into another, serves as it was (docs/postgresql.md, "Back up and restore").

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::HubProcess;
use knooppunt_test_postgres::Cluster;
use serde_json::{Value, json};

const TOKEN: &str = "upgrade-admin";
const TYPE: &str = "nl.test.upgrade";
const SOURCE: &str = "urn:nld:oin:00000001823288444000:systeem:upgrade";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/previous-release")
}

fn fixture() -> Value {
    serde_json::from_slice(&std::fs::read(fixtures().join("fixture.json")).unwrap()).unwrap()
}

/// A window, in seconds, longer than the fixtures are old by a day, whenever the test runs:
/// `fixture.json`'s `madeAtMs` is when `make.sh` made them. A default window (24 hours of
/// duplicate detection, a year of audit) is a date after which a fixed fixture has aged out
/// of it and the test would fail by the calendar alone.
fn covering_the_fixtures_age() -> u64 {
    let made_at_ms = fixture()["madeAtMs"]
        .as_u64()
        .expect("fixture.json: madeAtMs");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    now_ms.saturating_sub(made_at_ms) / 1000 + 24 * 3600
}

/// The configuration the fixtures were made with, with duplicate detection and the audit's
/// retention covering the fixtures' age.
fn config(dir: &Path) -> PathBuf {
    let hash = knooppunt_broker::hash_token(TOKEN);
    let window = covering_the_fixtures_age();
    let retention = window.max(365 * 24 * 3600);
    let path = dir.join("knooppunt.toml");
    std::fs::write(
        &path,
        format!(
            "[ingest]\nreserve_oin_sources = false\ndedupe_window = \"PT{window}S\"\n\n\
             [audit]\nretention = \"PT{retention}S\"\n\n[[principals]]\nname = \"admin\"\n\
             token_sha256 = \"{hash}\"\nroles = [\"admin\", \"publisher\", \"subscriber\"]\n"
        ),
    )
    .unwrap();
    path
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Every event of pull subscription `id`, by id.
async fn drain(client: &reqwest::Client, hub: &HubProcess, id: &str) -> BTreeSet<String> {
    common::drain(client, hub, TOKEN, id)
        .await
        .iter()
        .map(|event| event["id"].as_str().unwrap().to_owned())
        .collect()
}

fn event(id: &str) -> Value {
    json!({"specversion": "1.0", "id": id, "source": SOURCE, "type": TYPE, "data": {}})
}

/// What a hub opened on the previous release's state must show and do.
async fn carries_on(hub: &HubProcess, written: &Value) {
    let client = reqwest::Client::new();
    let subscription = written["subscription"].as_str().unwrap();
    let principal = common::get_json(&client, hub, TOKEN, "/v1/principals/gemeente").await;
    assert_eq!(principal["roles"], json!(["subscriber"]));
    let catalog = common::get_json(&client, hub, TOKEN, "/v1/eventtypes").await;
    assert!(
        catalog
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == TYPE),
        "{catalog}"
    );
    let kept = common::get_json(
        &client,
        hub,
        TOKEN,
        &format!("/v1/subscriptions/{subscription}"),
    )
    .await;
    assert_eq!(kept["config"]["delivery"], "pull", "{kept}");
    // Its events were accepted when the fixtures were made: a `ttl` (PT24H as made) shorter
    // than their age would make them dead letters when handed out. Replaced with one that
    // covers their age, the subscription hands them out whenever the test runs.
    let mut replacement = kept.clone();
    replacement["config"]["ttl"] = json!(format!("PT{}S", covering_the_fixtures_age()));
    let replaced = client
        .put(hub.url(&format!("/v1/subscriptions/{subscription}")))
        .bearer_auth(TOKEN)
        .json(&replacement)
        .send()
        .await
        .unwrap();
    assert_eq!(replaced.status(), 200, "{}", replaced.text().await.unwrap());

    // An event the previous release accepted is still known: publishing it again is a
    // duplicate, not a new delivery.
    let again = client
        .post(hub.url("/v1/events"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/cloudevents+json")
        .body(event("upgrade-3").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 202);
    let receipt: Value = again.json().await.unwrap();
    assert_eq!(receipt["duplicate"], true, "{receipt}");
    common::publish_batch(&client, hub, TOKEN, vec![event("after-upgrade")]).await;

    let acknowledged: BTreeSet<String> = written["acknowledged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap().to_owned())
        .collect();
    let mut expected: BTreeSet<String> = (0..50)
        .map(|i| format!("upgrade-{i}"))
        .filter(|id| !acknowledged.contains(id))
        .collect();
    expected.insert("after-upgrade".into());
    assert_eq!(drain(&client, hub, subscription).await, expected);

    let verified = common::get_json(&client, hub, TOKEN, "/v1/audit/verify").await;
    assert_eq!(verified["intact"], true, "{verified}");
    assert!(verified["entries"].as_u64().unwrap() >= 3, "{verified}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todays_hub_opens_a_data_directory_of_the_previous_release() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    copy_dir(&fixtures().join("embedded"), &data);
    let hub = HubProcess::start(&config(dir.path()), &data);
    carries_on(&hub, &fixture()["embedded"]).await;
    assert!(hub.terminate().success());
}

/// A data directory of a newer format (a later release wrote it) is refused at start, with
/// the format named, not served: the hub exits and says what to do.
#[test]
fn todays_hub_refuses_a_data_directory_of_a_later_release() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    copy_dir(&fixtures().join("embedded"), &data);
    {
        let db = sled::open(&data).unwrap();
        let later = knooppunt_store_embedded::FORMAT_VERSION + 1;
        db.insert("knooppunt.format", &later.to_be_bytes()).unwrap();
        db.flush().unwrap();
    }
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_knooppunt"))
        .args(common::serve_args(&config(dir.path()), &data))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("newer than this hub knows") && said.contains("format version"),
        "{said}"
    );
}

/// A hub on PostgreSQL started with `database`.
fn postgres_hub(dir: &Path, url: &str) -> HubProcess {
    HubProcess::start_with_env(
        &config(dir),
        &dir.join("data"),
        &[
            ("KNOOPPUNT_STORE_BACKEND", "postgres"),
            ("KNOOPPUNT_STORE_URL", url),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todays_hub_migrates_and_serves_a_database_of_the_previous_release() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start();
    let url = cluster.create_database("previous");
    cluster.psql_file("previous", &fixtures().join("postgres.sql"));
    let hub = postgres_hub(dir.path(), &url);
    carries_on(&hub, &fixture()["postgres"]).await;
    assert!(hub.terminate().success());
}

/// docs/postgresql.md's backup: `pg_dump --format=custom` of a serving hub's database,
/// `pg_restore` into an empty one; a hub on the restored database has every event
/// acknowledged before the dump, and its audit trail is whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_hubs_database_restored_from_pg_dump_serves_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start();
    let url = cluster.create_database("live");
    let hub = postgres_hub(dir.path(), &url);
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
    let batch = (0..300).map(|i| event(&format!("dumped-{i}"))).collect();
    common::publish_batch(&client, &hub, TOKEN, batch).await;

    let dump = dir.path().join("knooppunt.dump");
    let dumped = cluster
        .client("pg_dump")
        .args(["--format=custom", "--no-owner", "--file"])
        .arg(&dump)
        .arg("live")
        .output()
        .unwrap();
    assert!(dumped.status.success(), "{dumped:?}");
    assert!(hub.terminate().success());

    let restored_url = cluster.create_database("restored");
    let restored = cluster
        .client("pg_restore")
        .args(["--no-owner", "--exit-on-error", "-d", "restored"])
        .arg(&dump)
        .output()
        .unwrap();
    assert!(restored.status.success(), "{restored:?}");
    let hub = postgres_hub(dir.path(), &restored_url);
    let received = drain(&client, &hub, &subscription).await;
    let expected: BTreeSet<String> = (0..300).map(|i| format!("dumped-{i}")).collect();
    assert_eq!(received, expected);
    let verified = common::get_json(&client, &hub, TOKEN, "/v1/audit/verify").await;
    assert_eq!(verified["intact"], true, "{verified}");
    assert!(hub.terminate().success());
}
