//! The audit trail's head, anchored outside the store: entries removed from the end of
//! the chain (which leaves it intact) are found, on both backends.

mod common;

use common::{Backend, on_both_backends};

const TOKEN: &str = "audit-admin-token";

/// The last entry of the trail is removed while the hub is stopped, as someone with access
/// to the store could: the chain stays intact, but the hub refuses to start against its
/// checkpoint, and `audit verify --head` with the head it gave before finds the gap.
async fn removing_the_newest_entries_is_found(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let mut hub = backend.hub(dir.path(), "a", TOKEN);
    let client = reqwest::Client::new();
    for name in ["een", "twee"] {
        let created = client
            .post(hub.url("/v1/principals"))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({"name": name, "roles": ["subscriber"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);
    }
    let head = common::get_json(&client, &hub, TOKEN, "/v1/audit/head").await;
    let sequence = head["sequence"].as_u64().unwrap();
    assert!(sequence >= 2, "{head}");
    let said = format!("{sequence}:{}", head["hash"].as_str().unwrap());
    assert_eq!(head["head"], said.as_str());
    assert!(
        hub.log()
            .iter()
            .any(|line| line.contains("Audit trail head.")
                && line.contains(head["hash"].as_str().unwrap())),
        "every change logs the head"
    );
    let metrics = client
        .get(hub.url("/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            "knooppunt_audit_head_sequence{{hash=\"{}\"}} {sequence}",
            head["hash"].as_str().unwrap()
        )),
        "{metrics}"
    );
    assert!(hub.stop().success());
    drop(hub);

    // Remove the newest entry, and the head the store keeps beside it.
    match &backend {
        Backend::Embedded => {
            let db = sled::open(dir.path().join("a")).unwrap();
            let tree = db.open_tree("audit").unwrap();
            let (key, _) = tree.last().unwrap().expect("entries");
            tree.remove(key).unwrap();
            db.flush().unwrap();
        }
        Backend::Postgres {
            _cluster: cluster, ..
        } => {
            cluster.psql(
                "audit",
                "DELETE FROM audit WHERE seq = (SELECT max(seq) FROM audit); \
                 UPDATE audit_head SET seq = (SELECT max(seq) FROM audit), \
                   hash = (SELECT entry::json->>'hash' FROM audit ORDER BY seq DESC LIMIT 1)",
            );
        }
    }

    // The hub compares the store with its checkpoint and refuses to start.
    let config = dir.path().join("knooppunt.toml");
    let refused = backend
        .serve_command(&config, dir.path(), "a")
        .output()
        .unwrap();
    let said_why = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{said_why}");
    assert!(
        said_why.contains("entries were removed from its end") && said_why.contains("audit-head"),
        "{said_why}"
    );

    // Moved aside on purpose, it starts; the chain alone looks intact, the head says not.
    std::fs::rename(
        dir.path().join("a").join("audit-head"),
        dir.path().join("audit-head.kept"),
    )
    .unwrap();
    let hub = backend.hub_with(&config, dir.path(), "a");
    let verify = |head: Option<&str>| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_knooppunt"));
        command
            .args(["audit", "verify", "--url", &hub.url(""), "--token", TOKEN])
            .args(head.map(|h| vec!["--head", h]).unwrap_or_default());
        command.output().unwrap()
    };
    let plain = verify(None);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stdout)
    );
    let anchored = verify(Some(&said));
    let text = String::from_utf8_lossy(&anchored.stdout);
    assert_eq!(anchored.status.code(), Some(3), "{text}");
    assert!(
        text.contains("NOT COMPLETE") && text.contains("removed"),
        "{text}"
    );
}

on_both_backends!(
    truncation_on_the_embedded_store,
    truncation_on_postgres,
    removing_the_newest_entries_is_found,
    "audit"
);

/// A hub whose audit retention is two seconds, swept every second.
fn short_retention(dir: &std::path::Path) -> std::path::PathBuf {
    let config = common::config_with_admin(dir, TOKEN);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[audit]\nretention = \"PT2S\"\n\n[ingest]\nsweep_interval = \"PT1S\"\n");
    std::fs::write(&config, text).unwrap();
    config
}

/// `knooppunt audit verify` against `hub`: its exit code and what it printed.
fn verify_trail(hub: &common::HubProcess) -> (Option<i32>, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_knooppunt"))
        .args(["audit", "verify", "--url", &hub.url(""), "--token", TOKEN])
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// Removes the oldest audit entry the store holds, with the hub stopped, as someone with
/// access to the store could; its sequence number.
fn remove_the_oldest_entry(backend: &Backend, dir: &std::path::Path) -> u64 {
    match backend {
        Backend::Embedded => {
            let db = sled::open(dir.join("a")).unwrap();
            let tree = db.open_tree("audit").unwrap();
            let (key, _) = tree.first().unwrap().expect("entries");
            tree.remove(&key).unwrap();
            db.flush().unwrap();
            u64::from_be_bytes(key.as_ref().try_into().unwrap())
        }
        Backend::Postgres {
            _cluster: cluster, ..
        } => {
            let oldest = cluster.psql(DATABASE, "SELECT min(seq) FROM audit");
            cluster.psql(
                DATABASE,
                "DELETE FROM audit WHERE seq = (SELECT min(seq) FROM audit)",
            );
            oldest.trim().parse().unwrap()
        }
    }
}

/// The trail's start is anchored as its end is: deleting the oldest entry with the hub
/// stopped breaks verification (a second old, with a year of retention), while the hub's
/// own removals by retention are recorded on the trail before they happen, so a trail
/// that retention shortened verifies, and one whose oldest kept entry is deleted does not.
async fn removing_the_oldest_entries_is_found(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let create = |hub: &common::HubProcess, name: &str| {
        let request = client
            .post(hub.url("/v1/principals"))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({"name": name, "roles": ["subscriber"]}));
        async move { assert_eq!(request.send().await.unwrap().status(), 201) }
    };

    // Entry 1, deleted seconds after it was written, retention a year.
    let mut hub = backend.hub(dir.path(), "a", TOKEN);
    for name in ["een", "twee", "drie"] {
        create(&hub, name).await;
    }
    assert_eq!(verify_trail(&hub).0, Some(0));
    assert!(hub.stop().success());
    drop(hub);
    assert_eq!(remove_the_oldest_entry(&backend, dir.path()), 1);
    let mut hub = backend.hub(dir.path(), "a", TOKEN);
    let (code, said) = verify_trail(&hub);
    assert_eq!(code, Some(3), "{said}");
    assert!(
        said.contains("BROKEN") && said.contains("entry 2") && said.contains("up to 1"),
        "{said}"
    );
    let verified = common::get_json(&client, &hub, TOKEN, "/v1/audit/verify").await;
    assert_eq!(verified["intact"], false, "{verified}");
    assert_eq!(verified["brokenAt"], 2, "{verified}");
    assert!(hub.stop().success());
    drop(hub);

    // The same trail under a retention of two seconds: the hub removes what is old, entry
    // 2 on, and says so on the trail first; the shortened trail verifies.
    let config = short_retention(dir.path());
    let mut hub = backend.hub_with(&config, dir.path(), "a");
    create(&hub, "vier").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let verified = loop {
        let verified = common::get_json(&client, &hub, TOKEN, "/v1/audit/verify").await;
        if verified["first"].as_u64().unwrap() > 4 || std::time::Instant::now() > deadline {
            break verified;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert!(verified["first"].as_u64().unwrap() > 4, "{verified}");
    assert_eq!(verified["intact"], true, "{verified}");
    assert_eq!(verify_trail(&hub).0, Some(0));
    let removals = common::get_json(&client, &hub, TOKEN, "/v1/audit?name=audit.retention").await;
    let removals = removals.as_array().unwrap();
    assert!(!removals.is_empty());
    assert!(
        removals
            .iter()
            .all(|r| r["actor"] == "knooppunt" && r["details"]["removedThrough"].is_u64()),
        "{removals:?}"
    );
    assert!(hub.stop().success());
    drop(hub);

    // Its oldest kept entry deleted: not retention's doing, and verification says so.
    let oldest = remove_the_oldest_entry(&backend, dir.path());
    let hub = backend.hub_with(&config, dir.path(), "a");
    let (code, said) = verify_trail(&hub);
    assert_eq!(code, Some(3), "{said}");
    assert!(
        said.contains("BROKEN") && said.contains(&format!("up to {oldest}")),
        "{said}"
    );
    assert!(hub.terminate().success());
}

const DATABASE: &str = "audit_start";

on_both_backends!(
    deletion_at_the_start_on_the_embedded_store,
    deletion_at_the_start_on_postgres,
    removing_the_oldest_entries_is_found,
    "audit_start"
);
